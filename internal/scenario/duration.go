package scenario

import "time"

const (
	defaultCycleTimeout = 2 * time.Minute
	minCycleTimeout     = time.Second
	maxCycleTimeout     = time.Hour
)
