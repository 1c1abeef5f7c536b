package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// IsHelp reports whether arg asks for help.
func IsHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// ParseFlags parses a command's flags; fs's name is the command ("keys
// sweep"), prog the program's. A bad flag is one line naming it as --name
// and the way to the usage; --help prints the command's usage on stdout.
func ParseFlags(fs *flag.FlagSet, args []string, stdout io.Writer, prog, synopsis string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	help := fmt.Sprintf("run '%s --help' for usage", strings.TrimSpace(prog+" "+fs.Name()))
	switch {
	case errors.Is(err, flag.ErrHelp):
		PrintUsage(stdout, fs, synopsis)
		return ErrHelp
	case err != nil:
		return Usagef("%s (%s)", strings.TrimPrefix(fs.Name()+": "+flagError(fs, err), ": "), help)
	case fs.NArg() > 0:
		return Usagef("%s (%s)", strings.TrimPrefix(fs.Name()+": unexpected argument "+fmt.Sprintf("%q", fs.Arg(0)), ": "), help)
	}
	return nil
}

// dashFlag matches a flag name as package flag spells it in its errors.
var dashFlag = regexp.MustCompile(`(^|[: ])-([a-zA-Z][a-zA-Z0-9-]*)`)

// flagForm matches the flag a package flag error is about.
var flagForm = regexp.MustCompile(`for flag --([a-zA-Z0-9-]+)`)

// flagError rewrites package flag's error in this CLI's spelling (--name),
// and says what a duration looks like.
func flagError(fs *flag.FlagSet, err error) string {
	msg := dashFlag.ReplaceAllString(err.Error(), "$1--$2")
	if m := flagForm.FindStringSubmatch(msg); m != nil {
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

// Deprecated begins the usage of a deprecated flag, followed by the name
// of the flag that replaces it; PrintUsage leaves such flags out.
const Deprecated = "deprecated: use --"

// Alias makes old another name of fs's flag name, kept for old command
// lines: it sets the same value, WarnDeprecated says so once parsed.
func Alias(fs *flag.FlagSet, old, name string) {
	fs.Var(fs.Lookup(name).Value, old, Deprecated+name)
}

// WarnDeprecated writes one line to stderr for each deprecated flag set.
func WarnDeprecated(fs *flag.FlagSet, stderr io.Writer, prog string) {
	fs.Visit(func(f *flag.Flag) {
		if use, ok := strings.CutPrefix(f.Usage, Deprecated); ok {
			fmt.Fprintf(stderr, "%s: --%s is deprecated: use --%s\n", prog, f.Name, use)
		}
	})
}

// IsSet reports whether the flag name was set on the command line.
func IsSet(fs *flag.FlagSet, name string) (set bool) {
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// PrintUsage prints a command's synopsis and its flags, spelt --name.
func PrintUsage(w io.Writer, fs *flag.FlagSet, synopsis string) {
	fmt.Fprintf(w, "Usage: %s\n", synopsis)
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, Deprecated) {
			return
		}
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
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n        %s\n", line, usage)
	})
}

// Group dispatches a command with subcommands ("keys"): with no
// subcommand it is a usage error; --help or help prints usage, exit 0.
func Group(prog, name string, args []string, stdout io.Writer, usage string, subs map[string]func(args []string) error) error {
	if len(args) == 0 {
		return Usagef("%s: a subcommand is required (run '%s %s --help' for usage)", name, prog, name)
	}
	if IsHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return ErrHelp
	}
	if sub, ok := subs[args[0]]; ok {
		return sub(args[1:])
	}
	return Usagef("%s: unknown subcommand %q (run '%s %s --help' for usage)", name, args[0], prog, name)
}
