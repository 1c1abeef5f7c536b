module github.com/idem-dev/idem/idemgrpc

go 1.26.0

require (
	github.com/google/uuid v1.6.0
	github.com/idem-dev/idem v0.0.0-00010101000000-000000000000
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace github.com/idem-dev/idem => ..
