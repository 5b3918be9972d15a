package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dbhost/dbhost/internal/termsafe"
)

// completionCmd prints the shell completion script cobra generates from
// the command tree. The script is dbhost's own text: it is written raw.
func (a *app) completionCmd(root *cobra.Command) *cobra.Command {
	c := newCmd("completion bash|zsh|fish", "print the shell completion script")
	c.Example = `  dbhost completion bash > /etc/bash_completion.d/dbhost`
	c.Long = `Print the shell completion script for bash, zsh or fish. The Debian package installs
them; otherwise, for example:

  dbhost completion bash > /etc/bash_completion.d/dbhost
  dbhost completion zsh > "${fpath[1]}/_dbhost"
  dbhost completion fish > ~/.config/fish/completions/dbhost.fish`
	c.ValidArgs = []string{"bash", "zsh", "fish"}
	c.Args = argCount(1, 1, "one shell: bash, zsh or fish")
	c.Run = a.do(func(_ context.Context, args []string) int {
		w := termsafe.Raw(a.env.Stdout)
		var err error
		switch args[0] {
		case "bash":
			err = root.GenBashCompletionV2(w, true)
		case "zsh":
			err = root.GenZshCompletion(w)
		case "fish":
			err = root.GenFishCompletion(w, true)
		default:
			fmt.Fprintf(a.env.Stderr, "dbhost completion: unknown shell %q (want bash, zsh or fish)\n", args[0])
			return ExitError
		}
		if err != nil {
			fmt.Fprintln(a.env.Stderr, "dbhost completion:", err)
			return ExitError
		}
		return ExitOK
	})
	return c
}
