package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// errHelp: --help was asked for and the usage printed; exit 0.
var errHelp = errors.New("help shown")

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// parseFlags parses a command's flags. A bad flag is one line naming it
// as --name; --help prints the command's usage on stdout.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer, synopsis string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout, fs, synopsis)
		return errHelp
	case err != nil:
		return usageError("%s: %s (run 'paymentsd %s --help' for usage)", fs.Name(), flagError(fs, err), fs.Name())
	case fs.NArg() > 0:
		return usageError("%s: unexpected argument %q (run 'paymentsd %s --help' for usage)", fs.Name(), fs.Arg(0), fs.Name())
	}
	return nil
}

// deprecatedUsage begins the usage of a deprecated flag, followed by the
// name of the flag that replaces it.
const deprecatedUsage = "deprecated: use --"

// deprecatedFlag registers old as a deprecated spelling of the flag name:
// it sets the same value; warnDeprecated says so once parsed.
func deprecatedFlag(fs *flag.FlagSet, old, name string) {
	fs.Var(fs.Lookup(name).Value, old, deprecatedUsage+name)
}

// warnDeprecated writes one line to stderr for each deprecated flag set.
func warnDeprecated(fs *flag.FlagSet, stderr io.Writer) {
	fs.Visit(func(f *flag.Flag) {
		if use, ok := strings.CutPrefix(f.Usage, deprecatedUsage); ok {
			fmt.Fprintf(stderr, "paymentsd: --%s is deprecated: use --%s\n", f.Name, use)
		}
	})
}

// isSet reports whether the flag name was set on the command line.
func isSet(fs *flag.FlagSet, name string) (set bool) {
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// dashFlag matches a flag name as package flag spells it in its errors.
var dashFlag = regexp.MustCompile(`(^|[: ])-([a-zA-Z][a-zA-Z0-9-]*)`)

// flagError rewrites package flag's error in this CLI's spelling (--name),
// and says what a duration looks like.
func flagError(fs *flag.FlagSet, err error) string {
	msg := dashFlag.ReplaceAllString(err.Error(), "$1--$2")
	if m := regexp.MustCompile(`for flag --([a-zA-Z0-9-]+)`).FindStringSubmatch(msg); m != nil {
		if f := fs.Lookup(m[1]); f != nil {
			if g, ok := f.Value.(flag.Getter); ok {
				if _, ok := g.Get().(time.Duration); ok {
					msg += " (want a duration such as 30s, 15m or 48h)"
				}
			}
		}
	}
	return msg
}

// printUsage prints a command's synopsis and its flags, spelt --name.
func printUsage(w io.Writer, fs *flag.FlagSet, synopsis string) {
	fmt.Fprintf(w, "Usage: %s\n", synopsis)
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprint(w, "\nFlags:\n")
			first = false
		}
		kind, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if kind != "" {
			line += " " + kind
		}
		usage = strings.ReplaceAll(usage, "\n", "\n        ")
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n        %s\n", line, usage)
	})
}

// group dispatches a command with subcommands ("users", "keys"): with no
// subcommand it is a usage error, --help prints the usage and exits 0.
func group(name string, args []string, stdout io.Writer, usage string, subs map[string]func(args []string) error) error {
	if len(args) == 0 {
		return usageError("%s: a subcommand is required (run 'paymentsd %s --help' for usage)", name, name)
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return errHelp
	}
	if sub, ok := subs[args[0]]; ok {
		return sub(args[1:])
	}
	return usageError("%s: unknown subcommand %q (run 'paymentsd %s --help' for usage)", name, args[0], name)
}
