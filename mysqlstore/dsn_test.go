package mysqlstore_test

import (
	"testing"

	"github.com/idem-dev/idem/internal/require"
	"github.com/idem-dev/idem/mysqlstore"
)

func TestParseDSN(t *testing.T) {
	t.Parallel()
	// A password with the characters the driver's DSN form gives meaning
	// to, percent-encoded as a URL must.
	cfg, err := mysqlstore.ParseDSN("mysql://app:p%40ss%2Fw%3Ard%29@db.internal/payments?parseTime=true")
	require.NoError(t, err)
	require.Equal(t, "app", cfg.User)
	require.Equal(t, "p@ss/w:rd)", cfg.Passwd)
	require.Equal(t, "tcp", cfg.Net)
	require.Equal(t, "db.internal:3306", cfg.Addr)
	require.Equal(t, "payments", cfg.DBName)
	require.True(t, cfg.ParseTime)

	cfg, err = mysqlstore.ParseDSN("mysql://root@127.0.0.1:3307/")
	require.NoError(t, err)
	require.Equal(t, "root", cfg.User)
	require.Equal(t, "", cfg.Passwd)
	require.Equal(t, "127.0.0.1:3307", cfg.Addr)

	cfg, err = mysqlstore.ParseDSN("u:pw@tcp(10.0.0.1:3306)/db")
	require.NoError(t, err)
	require.Equal(t, "pw", cfg.Passwd)
	require.Equal(t, "db", cfg.DBName)
}
