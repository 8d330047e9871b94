// Package messages is acktor's wire protocol: the protobuf messages that
// spouts, processors and ackers exchange (see acktor.proto and
// docs/architecture.md).
//
// Regenerate with `go generate ./messages`. It needs protoc (Debian's
// protobuf-compiler) and builds protoc-gen-go at the version go.mod pins.
package messages

//go:generate go build -o ../bin/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
//go:generate protoc --plugin=protoc-gen-go=../bin/protoc-gen-go --go_out=. --go_opt=paths=source_relative acktor.proto
