// Package version is what a binary's --version prints: its release, the
// commit it was built from and the Go that built it.
//
// make release stamps Version and Commit with -ldflags -X; any other build
// reports what Go recorded in the binary (runtime/debug.ReadBuildInfo): the
// main module's version, a pseudo-version or "(devel)" built in a checkout,
// and the VCS revision, "+dirty" when the tree had changes.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by make release:
//
//	-ldflags "-X github.com/idem-dev/idem/cmd/internal/version.Version=v0.1.0
//	          -X github.com/idem-dev/idem/cmd/internal/version.Commit=<sha>"
var (
	Version string
	Commit  string
)

// Requested reports whether args, a command line without the program's
// name, ask for the version only: --version, -version, or the command
// version.
func Requested(args []string) bool {
	return len(args) == 1 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version")
}

// String is the version line of the binary name:
// "paymentsd v0.1.0 (commit 0123abc…, go1.26.8 linux/amd64)", the Go
// version and platform being the binary's own.
func String(name string) string {
	info, _ := debug.ReadBuildInfo()
	return line(name, Version, Commit, info)
}

func line(name, version, commit string, info *debug.BuildInfo) string {
	dirty := false
	if info != nil {
		if version == "" {
			version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if commit == "" {
					commit = s.Value
				}
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if version == "" {
		version = "(unknown)"
	}
	if commit == "" {
		commit = "unknown"
	} else if dirty {
		commit += "+dirty"
	}
	return fmt.Sprintf("%s %s (commit %s, %s %s/%s)", name, version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
