// Command watch subscribes to a running speed layer's top zones over
// WebSocket and prints each update.
//
//	go run ./examples/speedlayer/cmd/watch --gateway http://127.0.0.1:7070
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/acktor/acktor/topologies/speedlayer"
)

func main() {
	gw := flag.String("gateway", "http://127.0.0.1:7070", "the speed layer's gateway")
	top := flag.Int("top", 5, "zones to print")
	every := flag.Duration("every", time.Second, "how often the stream may update (100ms..1m)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := speedlayer.Watch(ctx, *gw, *top, *every, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
