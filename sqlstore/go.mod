module github.com/idem-dev/idem/sqlstore

go 1.26.0

require (
	github.com/idem-dev/idem v0.0.0-00010101000000-000000000000
	github.com/idem-dev/idem/idemshared v0.0.0-00010101000000-000000000000
)

require github.com/google/uuid v1.6.0 // indirect

replace (
	github.com/idem-dev/idem => ..
	github.com/idem-dev/idem/idemshared => ../idemshared
)
