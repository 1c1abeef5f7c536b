module github.com/idem-dev/idem/idemshared

go 1.26.0

require github.com/idem-dev/idem v0.0.0-00010101000000-000000000000

replace github.com/idem-dev/idem => ..
