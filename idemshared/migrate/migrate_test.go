package migrate_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/idem-dev/idem/idemshared/migrate"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	file := &fstest.MapFile{Data: []byte("SELECT 1;")}
	ms, err := migrate.Load(fstest.MapFS{"003_later.sql": file, "001_first.sql": file, "README.md": file})
	if err != nil {
		t.Fatalf("a gap is allowed: %v", err)
	}
	if len(ms) != 2 || ms[0].Version != 1 || ms[1].Version != 3 || ms[1].Name != "later" {
		t.Fatalf("loaded %+v, want versions 1 and 3, the second named later", ms)
	}
	for files, want := range map[string]string{"01_again.sql": "taken", "000_zero.sql": "start at 1"} {
		fsys := fstest.MapFS{files: file}
		if files == "01_again.sql" {
			fsys["001_first.sql"] = file
		}
		if _, err := migrate.Load(fsys); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", files, err, want)
		}
	}
}
