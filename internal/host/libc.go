package host

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"os"
)

// GlibcVersionArgs is the command whose answer GlibcVersion gives.
var GlibcVersionArgs = []string{"getconf", "GNU_LIBC_VERSION"}

// GlibcVersion is the output of `getconf GNU_LIBC_VERSION` ("glibc 2.36"),
// recorded under that command's key so that a snapshot replays it either
// way. Live, it is read first from the dynamic linker that getconf would
// load: glibc ships ld.so and libc.so.6 as one build (libc calls ld.so's
// private symbols, so they cannot differ), and ld.so carries the release
// banner `ld.so --version` prints. Reading a few kilobytes spares a fork
// and exec on every audit. When the linker cannot be read that way (no
// glibc, a static getconf, an unknown banner) getconf runs as before.
func (h *Host) GlibcVersion(ctx context.Context) ([]byte, error) {
	name, args := GlibcVersionArgs[0], GlibcVersionArgs[1:]
	if !h.System() || h.rec != nil {
		// Collection keeps recording exactly what it always recorded.
		return h.Run(ctx, name, args...)
	}
	// Live, nothing recorded: no probe to go through.
	if v, err := h.linkerGlibc(name); err == nil {
		return []byte("glibc " + v + "\n"), nil
	}
	return h.Run(ctx, name, args...)
}

// maxLinkerSize bounds what is read of a program or of its dynamic linker
// (ld.so is about 250 KB).
const maxLinkerSize = 16 << 20

// glibcBanner precedes the version in the release line of glibc's ld.so
// and libc.so.6: "... stable release version 2.36." (development builds:
// 2.36.9000).
const glibcBanner = "release version "

var errNoBanner = errors.New("no single glibc release banner")

// linkerGlibc reads the glibc version from the banner of the dynamic
// linker (PT_INTERP) of the program name resolves to. Both files must be
// ones only root can change, as for running the program.
func (h *Host) linkerGlibc(name string) (string, error) {
	prog, err := h.resolveProgram(name)
	if err != nil {
		return "", err
	}
	var interp string
	err = h.withELF(prog, func(f *elf.File) error {
		for _, p := range f.Progs {
			if p.Type != elf.PT_INTERP {
				continue
			}
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return err
			}
			interp = string(bytes.TrimRight(b, "\x00"))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if interp == "" {
		return "", errNoBanner // static: nothing says which libc
	}
	if err := h.CheckTrusted(interp); err != nil {
		return "", err
	}
	var version string
	err = h.withELF(interp, func(f *elf.File) error {
		s := f.Section(".rodata")
		if s == nil {
			return errNoBanner
		}
		b, err := s.Data()
		if err != nil {
			return err
		}
		for {
			i := bytes.Index(b, []byte(glibcBanner))
			if i < 0 {
				break
			}
			b = b[i+len(glibcBanner):]
			v := bannerVersion(b)
			if v == "" || version != "" && v != version {
				return errNoBanner
			}
			version = v
		}
		if version == "" {
			return errNoBanner
		}
		return nil
	})
	return version, err
}

// bannerVersion is the dotted number b starts with ("2.36" of "2.36."),
// or "" when it is not one (at least two numbers).
func bannerVersion(b []byte) string {
	n, dots := 0, 0
	for n < len(b) && (b[n] >= '0' && b[n] <= '9' || b[n] == '.' && n > 0 && b[n-1] != '.') {
		if b[n] == '.' {
			dots++
		}
		n++
	}
	v := string(b[:n])
	if len(v) > 0 && v[len(v)-1] == '.' {
		v, dots = v[:len(v)-1], dots-1
	}
	if dots == 0 {
		return ""
	}
	return v
}

// withELF opens an absolute path of the live system as an ELF file.
func (h *Host) withELF(p string, fn func(*elf.File) error) error {
	fd, _, err := h.openRead(rel(p), maxLinkerSize)
	if err != nil {
		return readErr(rel(p), err)
	}
	file := os.NewFile(uintptr(fd), p)
	defer file.Close()
	f, err := elf.NewFile(file)
	if err != nil {
		return err
	}
	return fn(f)
}
