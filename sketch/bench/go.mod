module github.com/acktor/acktor/sketch/bench

go 1.26.0

require (
	github.com/acktor/acktor v0.0.0
	github.com/axiomhq/hyperloglog v0.2.6
	github.com/bits-and-blooms/bloom/v3 v3.7.1
	github.com/tylertreat/BoomFilters v0.0.0-20251001182300-5b3723cc64ae
)

require (
	github.com/bits-and-blooms/bitset v1.24.2 // indirect
	github.com/d4l3k/messagediff v1.2.1 // indirect
	github.com/dgryski/go-metro v0.0.0-20250106013310-edb8663e5e33 // indirect
	github.com/kamstrup/intmap v0.5.2 // indirect
)

replace github.com/acktor/acktor => ../..
