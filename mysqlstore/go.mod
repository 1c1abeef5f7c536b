module github.com/idem-dev/idem/mysqlstore

go 1.26.0

require (
	github.com/go-sql-driver/mysql v1.9.3
	github.com/google/uuid v1.6.0
	github.com/idem-dev/idem v0.0.0-00010101000000-000000000000
	github.com/idem-dev/idem/sqlstore v0.0.0-00010101000000-000000000000
)

require (
	filippo.io/edwards25519 v1.1.0 // indirect
	github.com/idem-dev/idem/idemshared v0.0.0-00010101000000-000000000000 // indirect
)

replace (
	github.com/idem-dev/idem => ..
	github.com/idem-dev/idem/idemshared => ../idemshared
	github.com/idem-dev/idem/sqlstore => ../sqlstore
)
