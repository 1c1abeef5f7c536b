module github.com/idem-dev/idem/idemamqp

go 1.26.0

require github.com/idem-dev/idem v0.0.0-00010101000000-000000000000

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/rabbitmq/amqp091-go v1.17.0
)

replace github.com/idem-dev/idem => ..
