package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
)

// DefaultBusyTimeout is the busy_timeout Open sets on every connection: how
// long the application's own statements on the returned *sql.DB wait for
// another connection's write lock before failing with SQLITE_BUSY. The
// store does not rely on it; it bounds its own waits (see DefaultMaxWait).
const DefaultBusyTimeout = 5 * time.Second

// settings are the DSN parameters Open sets. modernc.org/sqlite applies them
// to every new connection of the pool, which matters: all but journal_mode
// are per connection, not stored in the file.
var settings = strings.Join([]string{
	// Wait for a lock, rather than fail at once, in the application's own
	// statements.
	fmt.Sprintf("_busy_timeout=%d", DefaultBusyTimeout.Milliseconds()),
	// Readers never block the writer, nor the writer readers: a replay
	// (a read) goes through while another request holds the write lock.
	"_journal_mode=WAL",
	// Sync the WAL at every commit: an acknowledged payment survives power
	// loss. NORMAL, the usual WAL companion, may lose the last commits.
	"_synchronous=FULL",
	// On macOS, fsync does not flush the drive's cache; F_FULLFSYNC does.
	// Elsewhere SQLite ignores it.
	"_pragma=fullfsync(1)",
	"_foreign_keys=1",
	// db.BeginTx starts with BEGIN IMMEDIATE: a transaction takes the write
	// lock at its start, so it never has to upgrade a read lock, which in
	// WAL mode fails with SQLITE_BUSY_SNAPSHOT instead of waiting.
	"_txlock=immediate",
}, "&")

// Open opens the SQLite database file at path, creating it if needed, with
// the settings the store needs on every connection: WAL journal, foreign
// keys on, a busy timeout (DefaultBusyTimeout), synchronous=FULL and
// BEGIN IMMEDIATE transactions.
//
// path is a file name, not a URI. ":memory:" and "" are refused: each
// connection of the pool would get a private database of its own, so a
// claim made on one connection would be invisible on the next.
func Open(path string) (*sql.DB, error) {
	switch {
	case path == ":memory:":
		return nil, fmt.Errorf("sqlitestore: open %q: in-memory databases are not supported: each connection of the pool would get a database of its own; use a file (in tests, one in t.TempDir())", path)
	case path == "":
		return nil, errors.New("sqlitestore: open: empty path: SQLite would give each connection a private temporary database; use a file")
	case strings.HasPrefix(path, "file:"):
		return nil, fmt.Errorf("sqlitestore: open %q: want a file path, not a URI", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %q: %w", path, err)
	}
	if err := createPrivate(abs); err != nil {
		return nil, fmt.Errorf("sqlitestore: open %q: %w", path, err)
	}
	db, err := sql.Open("sqlite", "file:"+uriPath(filepath.ToSlash(abs))+"?"+settings)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %q: %w", path, err)
	}
	// Open a connection now, so a bad path or setting fails here, and check
	// the journal mode took: SQLite silently stays in rollback mode where
	// WAL cannot work (some network file systems), and there readers and
	// the writer block each other.
	var mode string
	if err := db.QueryRowContext(context.Background(), "PRAGMA journal_mode").Scan(&mode); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitestore: open %q: %w", path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		db.Close()
		return nil, fmt.Errorf("sqlitestore: open %q: journal_mode is %q, want wal (is the file on a network file system?)", path, mode)
	}
	return db, nil
}

// createPrivate creates the database file, when missing, readable and
// writable by its owner only: it holds every stored answer. SQLite gives
// the -wal and -shm files it makes next to it the same permissions; it
// would make the file 0644 itself. An existing file keeps its own.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// uriPath escapes the characters that would end the path part of a SQLite
// URI filename, so any file name opens as itself.
func uriPath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
}
