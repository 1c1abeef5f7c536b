package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

// parseArgs parses args into fs, then fills every flag the command line
// left unset from the configuration file named by --config, if any: a JSON
// object whose names are the server's flags' names, so a flag always
// overrides the file. A routes value may be a list of strings. The keys
// commands read the same file, and use its db.
func parseArgs(fs *flag.FlagSet, args []string) error {
	config := fs.String("config", "", "a JSON file of settings named as these flags; a flag given on the command line overrides it")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError(err.Error())
	}
	if fs.NArg() > 0 {
		return usageError(fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	if *config == "" {
		return nil
	}
	settings, err := readConfig(*config)
	if err != nil {
		return usageError(fmt.Sprintf("--config %s: %v", *config, err))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if name == "config" || !serverSetting(name) {
			return usageError(fmt.Sprintf("--config %s: unknown setting %q", *config, name))
		}
		if set[name] || fs.Lookup(name) == nil { // a setting of the server only: the keys commands skip it
			continue
		}
		if err := fs.Set(name, settings[name]); err != nil {
			return usageError(fmt.Sprintf("--config %s: %s %q: %v", *config, name, settings[name], err))
		}
	}
	return nil
}

// readConfig reads a configuration file into flag values.
func readConfig(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.Unwrap(err) // the path is already in the message
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	settings := make(map[string]string, len(raw))
	for name, v := range raw {
		s, err := flagValue(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		settings[name] = s
	}
	return settings, nil
}

// flagValue is a JSON value as a flag would be given it: a string as is, a
// boolean or number in JSON's spelling, a list of strings joined by commas.
func flagValue(v json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s, nil
	}
	var list []string
	if err := json.Unmarshal(v, &list); err == nil {
		return strings.Join(list, ","), nil
	}
	var scalar any
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	if err := d.Decode(&scalar); err == nil {
		switch scalar.(type) {
		case bool, json.Number:
			return string(bytes.TrimSpace(v)), nil
		}
	}
	return "", errors.New("want a string, a boolean, a number or a list of strings")
}

// serverSetting reports whether name is one of the server's flags.
func serverSetting(name string) bool {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	new(options).register(fs)
	return fs.Lookup(name) != nil
}
