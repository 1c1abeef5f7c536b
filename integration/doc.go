// Package integration holds no code: its tests put an adapter or a store
// module together with a store from another module (PostgreSQL, SQLite),
// and the runnable examples that need one. They live in this module of
// their own so that the adapters' and stores' modules require only what
// their code imports: a user who imports idemgin downloads no store, no
// database driver and no test library. Each directory tests the module of
// its name; the tests of idemamqp need RabbitMQ (make test-rabbitmq).
package integration
