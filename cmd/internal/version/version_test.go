package version

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestLine(t *testing.T) {
	t.Parallel()
	info := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261204150000-0123456789ab"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}}}
	built := ", " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	for _, c := range []struct {
		name, version, commit string
		info                  *debug.BuildInfo
		want                  string
	}{
		{"what Go recorded", "", "", info,
			"paymentsd v0.0.0-20261204150000-0123456789ab (commit 0123456789abcdef+dirty" + built},
		{"stamped by make release", "v0.1.0", "fedcba9876543210", info,
			"paymentsd v0.1.0 (commit fedcba9876543210+dirty" + built},
		{"no build information", "", "", nil, "paymentsd (unknown) (commit unknown" + built},
	} {
		if got := line("paymentsd", c.version, c.commit, c.info); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestRequested(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]bool{"--version": true, "-version": true, "version": true, "serve": false, "": false} {
		if got := Requested([]string{args}); got != want {
			t.Errorf("Requested(%q) = %v, want %v", args, got, want)
		}
	}
	if Requested([]string{"--version", "--db", "x"}) {
		t.Error("--version among other flags is not a version request")
	}
}
