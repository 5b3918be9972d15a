# dbhost: `make test` installs what the tests need (as root, from the
# distribution's packages) and runs vet, format check and the whole suite.
GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
STATICCHECK_VERSION ?= v0.7.0

.PHONY: build test test-unit deps vet fmt-check lint bench fuzz fixtures hosts docs man package clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o dbhost ./cmd/dbhost

# The full suite: unit tests on recorded hosts, integration tests on private
# PostgreSQL/MariaDB/Redis servers, short fuzzing of the parsers.
test: deps vet fmt-check
	DBHOST_INTEGRATION=require $(GO) test -count=1 -timeout 12m ./...
	$(MAKE) fuzz FUZZTIME=5s

# Unit tests only: no root, no servers.
test-unit:
	$(GO) test -count=1 -short ./...

deps:
	@scripts/install-test-deps

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

lint: vet fmt-check
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

FUZZTIME ?= 30s
fuzz:
	@scripts/fuzz $(FUZZTIME)

bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./bench/...
	bench/compare.sh

# Re-record the host fixtures in testdata/hosts (root; changes and restores
# kernel settings, starts private servers), then derive the states this VM
# cannot produce from the new recordings. Both write the text form,
# testdata/hosts/NAME.ttar.
fixtures:
	scripts/install-test-deps --record
	$(GO) run ./tools/record all
	$(GO) run ./tools/derive-host
	$(GO) run ./tools/derive-memory
	$(GO) run ./tools/derive-storage

# The recorded hosts as snapshot archives, testdata/hosts/NAME.tar.gz, as
# `dbhost collect` writes them (the repository holds their text form): for
# `dbhost audit --from testdata/hosts/baseline.tar.gz` and the examples in
# docs/. The tests build their own.
hosts:
	$(GO) run ./tools/ttar build

# The Debian package: dist/dbhost_VERSION_ARCH.deb (binary, man pages, shell
# completions, systemd units, Prometheus rules, Grafana dashboard;
# deploy/README.md).
package:
	VERSION=$(VERSION) GO=$(GO) scripts/package-deb dist

docs: build
	./dbhost checks --format markdown > docs/checks.md

# The man pages, from the command tree: dist/man/dbhost.1, dbhost-audit.1, ...
# (man -l dist/man/dbhost-audit.1). The package builds its own.
man: build
	./dbhost man dist/man

clean:
	rm -f dbhost testdata/hosts/*.tar.gz
