package consoletest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// newBrowser starts a headless Chromium with a fresh profile of the
// test's and returns a tab's context, closed when the test ends.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium()),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	// The first call starts the browser, which lives as long as its
	// context: the tab's, with no timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium (%s): %v", chromium(), err)
	}
	return ctx
}

// actionTimeout bounds how long one step waits for the page it needs.
const actionTimeout = 2 * time.Minute

// do runs browser steps, failing the test with what it was doing.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, actionTimeout)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("browser: %s: %v\nat %s:\n%s", what, err, loc, body)
	}
}

// get runs one browser step that returns a value.
func get[T any](t *testing.T, ctx context.Context, what string, step chromedp.Action[T]) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, actionTimeout)
	defer cancel()
	v, err := chromedp.Run(sctx, step)
	if err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
	return v
}

// signIn signs in at the console at base as name.
func signIn(t *testing.T, ctx context.Context, base, name string) {
	t.Helper()
	do(t, ctx, "sign in",
		chromedp.Navigate(base),
		chromedp.WaitVisible(chromedp.ID("signin")),
		chromedp.SendKeys(chromedp.ID("name"), name),
		chromedp.SendKeys(chromedp.ID("token"), adminToken),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.CSS(".titlebar")),
	)
}

// text returns the visible text of the first element sel matches.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	do(t, ctx, "find "+sel, chromedp.WaitVisible(chromedp.CSS(sel)))
	return strings.TrimSpace(get(t, ctx, "read "+sel, chromedp.Text(chromedp.CSS(sel))))
}

// screenshot writes the whole page, as a PNG, to docs/console/name.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png := get(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	dir := filepath.Join("..", "docs", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// confirmAction fills an action form's reason and confirmation and
// submits it: the form's id prefix is action.
func confirmAction(t *testing.T, ctx context.Context, action, reason string) {
	t.Helper()
	do(t, ctx, action,
		chromedp.SendKeys(chromedp.ID(action+"-reason"), reason),
		chromedp.Click(chromedp.ID(action+"-confirm")),
		chromedp.Click(chromedp.ID(action+"-submit")),
		chromedp.WaitVisible(chromedp.CSS(".flash.notice")),
	)
}
