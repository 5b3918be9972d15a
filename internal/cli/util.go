package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dbhost/dbhost/internal/safefile"
	"github.com/dbhost/dbhost/internal/termsafe"
)

func writeFileAtomic(name string, mode os.FileMode, fill func(io.Writer) error) error {
	return safefile.Write(name, mode, fill)
}

// namingPath puts the path the user gave before an error that does not
// name it (one about a directory on its way, say).
func namingPath(path string, err error) error {
	if strings.Contains(err.Error(), path) {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// writeJSON is every command's json format: indented, and written past the
// terminal filter because the encoder escapes what needs escaping.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(termsafe.Raw(w))
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
