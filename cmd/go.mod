module github.com/idem-dev/idem/cmd

go 1.26.0

require (
	github.com/Shopify/toxiproxy/v2 v2.12.0
	github.com/google/uuid v1.6.0
	github.com/idem-dev/idem v0.0.0-00010101000000-000000000000
	github.com/idem-dev/idem/idemamqp v0.0.0-00010101000000-000000000000
	github.com/idem-dev/idem/idemgrpc v0.0.0-00010101000000-000000000000
	github.com/idem-dev/idem/idemnats v0.0.0-00010101000000-000000000000
	github.com/idem-dev/idem/idemotel v0.0.0-00010101000000-000000000000
	github.com/idem-dev/idem/idemprom v0.0.0-00010101000000-000000000000
	github.com/idem-dev/idem/mysqlstore v0.0.0-00010101000000-000000000000
	github.com/idem-dev/idem/payments v0.0.0-00010101000000-000000000000
	github.com/idem-dev/idem/payments/mysqlledger v0.0.0-00010101000000-000000000000
	github.com/idem-dev/idem/pgstore v0.0.0-00010101000000-000000000000
	github.com/idem-dev/idem/sqlitestore v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.13.0
	github.com/nats-io/nats-server/v2 v2.15.3
	github.com/nats-io/nats.go v1.56.0
	github.com/prometheus/client_golang v1.25.0
	github.com/rabbitmq/amqp091-go v1.17.0
	github.com/rs/zerolog v1.35.1
	go.opentelemetry.io/otel v1.47.0
	go.yaml.in/yaml/v3 v3.0.6
	go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp v1.47.0
	go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp v1.47.0
	go.opentelemetry.io/otel/sdk v1.47.0
	go.opentelemetry.io/otel/sdk/metric v1.47.0
	go.opentelemetry.io/proto/otlp v1.11.0
	golang.org/x/net v0.61.0
	gonum.org/v1/plot v0.17.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	filippo.io/edwards25519 v1.1.0 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/antithesishq/antithesis-sdk-go v0.9.0-default-no-op // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cenkalti/backoff/v5 v5.0.3 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/go-sql-driver/mysql v1.9.3 // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/google/go-tpm v0.9.8 // indirect
	github.com/gorilla/mux v1.8.1 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.30.0 // indirect
	github.com/idem-dev/idem/idemshared v0.0.0-00010101000000-000000000000 // indirect
	github.com/idem-dev/idem/sqlstore v0.0.0-00010101000000-000000000000 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/mattn/go-colorable v0.1.15 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/minio/highwayhash v1.0.4 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/nats-io/jwt/v2 v2.8.3 // indirect
	github.com/nats-io/nkeys v0.4.17 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	github.com/rs/xid v1.6.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace v1.47.0 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	golang.org/x/time v0.16.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260928230214-8a89bd6388cc // indirect
	gopkg.in/tomb.v1 v1.0.0-20141024135613-dd632973f1e7 // indirect
	modernc.org/libc v1.80.1 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
	modernc.org/sqlite v1.62.0 // indirect
)

replace (
	github.com/idem-dev/idem => ..
	github.com/idem-dev/idem/idemamqp => ../idemamqp
	github.com/idem-dev/idem/idemgrpc => ../idemgrpc
	github.com/idem-dev/idem/idemnats => ../idemnats
	github.com/idem-dev/idem/idemotel => ../idemotel
	github.com/idem-dev/idem/idemshared => ../idemshared
	github.com/idem-dev/idem/idemprom => ../idemprom
	github.com/idem-dev/idem/mysqlstore => ../mysqlstore
	github.com/idem-dev/idem/payments => ../payments
	github.com/idem-dev/idem/payments/mysqlledger => ../payments/mysqlledger
	github.com/idem-dev/idem/pgstore => ../pgstore
	github.com/idem-dev/idem/sqlitestore => ../sqlitestore
	github.com/idem-dev/idem/sqlstore => ../sqlstore
)
