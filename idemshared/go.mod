module github.com/idem-dev/idem/idemshared

go 1.26.0
