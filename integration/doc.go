// Package integration holds no code: it holds the tests that cannot live
// in the module they test without entering the module graph of everyone
// who imports that module. A module's test requirements are part of its
// go.mod, which every `go mod tidy` of a module importing it reads; so the
// adapters test themselves beside their code on memstore, the core's
// in-memory store, and what needs more lives here:
//
//   - sqlstore: storetest and the migration lock on PostgreSQL, through
//     pgx's database/sql driver, and Example_sqlc run on it. sqlstore
//     requires no driver (its users choose one), and a test driver in its
//     go.mod would put pgx into the graph of every user of sqlstore and
//     mysqlstore. sqlstore on MariaDB is mysqlstore's conformance test
//     (make test-mysql).
//   - idemnats: JetStream on an embedded NATS server, whose module
//     (nats-server) idemnats does not require; the consumer killed and
//     restarted on PostgreSQL.
//   - idemamqp: the consumer's effects on PostgreSQL, committed with the
//     key, under duplicates, redeliveries, a broker restart and a killed
//     consumer process: the store must outlive the process. They need
//     RabbitMQ (make test-rabbitmq); the adapter's own tests and its
//     Example are in idemamqp.
//   - idemotel: spans and metrics read back with the OpenTelemetry SDK's
//     in-memory exporters, which idemotel does not require (its users
//     pick their SDK), on PostgreSQL; its Example is in idemotel.
package integration
