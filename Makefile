# Test entry points. Needs Go, a C compiler (go test -race uses cgo), and
# either DATABASE_URL or local PostgreSQL server binaries: the tests run
# through scripts/test-postgres.sh, which starts a throwaway cluster.
#
#   make test                              gofmt check, go vet, go test -race
#   make test GOTESTFLAGS='-run TestX -v'  extra go test flags
#   make test PKGS=./internal/...          only some packages
#   make test-short                        same, with -short
#   make vet | make fmt
#   DATABASE_URL=postgres://... make test  use an existing server

GO          ?= go
GOFMT       ?= gofmt
GOTESTFLAGS ?=
PKGS        ?= ./...
TEST_PG     ?= ./scripts/test-postgres.sh
GOTEST       = CGO_ENABLED=1 $(TEST_PG) $(GO) test -race -count=1 -timeout 15m

.DEFAULT_GOAL := test
.PHONY: test test-short vet fmt fmt-check check-cc

# Prerequisites run one at a time, left to right: the C compiler check comes
# before anything else, and the tests run only if the checks pass.
.NOTPARALLEL:

test: check-cc fmt-check vet
	$(GOTEST) $(GOTESTFLAGS) $(PKGS)

test-short: check-cc fmt-check vet
	$(GOTEST) -short $(GOTESTFLAGS) $(PKGS)

vet:
	$(GO) vet $(PKGS)

# Go sources: tracked and untracked-but-not-ignored files of the git checkout;
# outside git (tarball, or git refusing a checkout owned by another user) all
# *.go files. Skips vendor/, testdata/ and files deleted from the work tree.
GOFILES_CMD = { git ls-files --cached --others --exclude-standard -- '*.go' 2>/dev/null \
	|| find . -name '*.go' -not -path './.git/*' | sed 's|^\./||'; } \
	| grep -v -e '^vendor/' -e '^testdata/' -e '/testdata/' \
	| while read -r f; do if [ -f "$$f" ]; then echo "$$f"; fi; done

fmt:
	@files=$$($(GOFILES_CMD)); \
	if [ -n "$$files" ]; then $(GOFMT) -l -w $$files; fi

fmt-check:
	@files=$$($(GOFILES_CMD)); \
	if [ -z "$$files" ]; then exit 0; fi; \
	bad=$$($(GOFMT) -l $$files) || exit 1; \
	if [ -n "$$bad" ]; then \
	  echo "gofmt: these files are not formatted (run 'make fmt'):" >&2; \
	  echo "$$bad" | sed 's/^/    /' >&2; \
	  exit 1; \
	fi

# -race needs cgo, i.e. the C compiler cgo will call (go env CC; gcc by default).
check-cc:
	@cc=$$($(GO) env CC 2>/dev/null); cc=$${cc%% *}; cc=$${cc:-gcc}; \
	if ! command -v "$$cc" >/dev/null 2>&1; then \
	  echo "error: go test -race needs cgo, but the C compiler '$$cc' was not found: install gcc (Debian/Ubuntu: apt-get install build-essential; macOS: xcode-select --install) or set CC" >&2; \
	  exit 1; \
	fi
