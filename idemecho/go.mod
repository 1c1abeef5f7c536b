module github.com/idem-dev/idem/idemecho

go 1.26.0

require (
	github.com/idem-dev/idem v0.0.0-00010101000000-000000000000
	github.com/labstack/echo/v5 v5.4.6
)

require (
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)

replace github.com/idem-dev/idem => ..
