package migrate_test

import (
	"testing"
	"testing/fstest"

	"github.com/idem-dev/idem/internal/require"

	"github.com/idem-dev/idem/internal/migrate"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	file := &fstest.MapFile{Data: []byte("SELECT 1;")}
	ms, err := migrate.Load(fstest.MapFS{"003_later.sql": file, "001_first.sql": file, "README.md": file})
	require.NoError(t, err, "a gap is allowed")
	require.Len(t, ms, 2)
	require.Equal(t, []int{1, 3}, []int{ms[0].Version, ms[1].Version})
	require.Equal(t, "later", ms[1].Name)

	_, err = migrate.Load(fstest.MapFS{"001_first.sql": file, "01_again.sql": file})
	require.ErrorContains(t, err, "taken")
	_, err = migrate.Load(fstest.MapFS{"000_zero.sql": file})
	require.ErrorContains(t, err, "start at 1")
}
