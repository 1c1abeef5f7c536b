module github.com/idem-dev/idem/repositories

go 1.26.0

replace (
	github.com/idem-dev/idem => ..
	github.com/idem-dev/idem/idemshared => ../idemshared
	github.com/idem-dev/idem/pgstore => ../pgstore
	github.com/idem-dev/idem/sqlitestore => ../sqlitestore
	github.com/idem-dev/idem/sqlstore => ../sqlstore
)

require (
	github.com/idem-dev/idem v0.0.0-00010101000000-000000000000
	github.com/idem-dev/idem/pgstore v0.0.0-00010101000000-000000000000
	github.com/idem-dev/idem/sqlitestore v0.0.0-00010101000000-000000000000
	github.com/idem-dev/idem/sqlstore v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.13.0
	github.com/jmoiron/sqlx v1.4.0
	github.com/lib/pq v1.12.3
	gorm.io/driver/postgres v1.6.0
	gorm.io/driver/sqlite v1.6.0
	gorm.io/gorm v1.31.2
)

require (
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/go-sql-driver/mysql v1.9.3 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/idem-dev/idem/idemshared v0.0.0-00010101000000-000000000000 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/jinzhu/inflection v1.0.0 // indirect
	github.com/jinzhu/now v1.1.5 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/mattn/go-sqlite3 v1.14.22 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	modernc.org/libc v1.80.1 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
	modernc.org/sqlite v1.62.0 // indirect
)
