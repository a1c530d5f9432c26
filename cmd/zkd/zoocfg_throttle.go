package main

import (
	"errors"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/zkd-io/zkd/server"
)

// The overload keys of ZooKeeper 3.6+, read as ZooKeeper reads them: zoo.cfg lines (which
// ZooKeeper turns into zookeeper.<key> system properties) with or without the zookeeper. prefix.

// throttleKeys are the keys setThrottle reads (without the zookeeper. prefix).
var throttleKeys = map[string]bool{
	"globalOutstandingLimit": true, "throttled_op_wait_time": true, "request_throttle": true,
	"request_throttle_max_requests": true, "request_throttle_stall_time": true, "request_throttle_drop_stale": true,
	"connection_throttle_tokens": true, "connection_throttle_fill_time": true, "connection_throttle_fill_count": true,
	"connection_throttle_freeze_time": true, "connection_throttle_drop_increase": true,
	"connection_throttle_drop_decrease": true, "connection_throttle_decrease_ratio": true,
	"connection_throttle_weight_enabled": true, "connection_throttle_global_session_weight": true,
	"connection_throttle_local_session_weight": true, "connection_throttle_renew_session_weight": true,
	"largeRequestThreshold": true, "largeRequestMaxBytes": true,
}

// isThrottleKey reports whether k (without the zookeeper. prefix) is one of them.
func isThrottleKey(k string) bool { return throttleKeys[k] }

// setThrottle applies one overload key to cfg.
func setThrottle(cfg *server.Config, key, k, v string, log *slog.Logger) error {
	var err error
	switch k {
	case "globalOutstandingLimit":
		// ZooKeeper takes any integer; zero or less there stops reading every connection that
		// has a request unanswered. zkd wants a positive limit (server.Config: 0 is the default).
		cfg.GlobalOutstandingLimit, err = positiveInt(key, v)
	case "request_throttle_max_requests":
		cfg.RequestThrottleMaxRequests, err = nonNegativeInt(key, v)
	case "request_throttle_stall_time":
		cfg.RequestThrottleStallTime, err = millis(key, v, true)
	case "request_throttle_drop_stale":
		var drop bool
		drop, err = boolValue(key, v)
		cfg.RequestThrottleKeepStale = !drop
	case "request_throttle":
		// ZooKeeper's kill switch for the throttler stage itself; zkd has no such stage.
		var on bool
		if on, err = boolValue(key, v); err == nil && !on {
			log.Warn("zoo.cfg: request_throttle=false has no effect in zkd: request_throttle_max_requests=0 (the default) turns the request throttler off", "key", key)
		}
	case "throttled_op_wait_time":
		n, err := strconv.Atoi(v)
		if err != nil {
			return keyError(key, v, errors.New("must be an integer"))
		}
		if n > 0 {
			log.Warn("zoo.cfg: throttled_op_wait_time is not honoured: zkd never answers ThrottledOp (-127), "+
				"which clients older than it (kazoo 2.8 among them) cannot read and hang on; "+
				"throttled requests wait instead (docs/differences.md)", "key", key, "value", v)
		}
	case "connection_throttle_tokens":
		cfg.ConnThrottleTokens, err = nonNegativeInt(key, v)
	case "connection_throttle_fill_time":
		cfg.ConnThrottleFillTime, err = millis(key, v, false)
	case "connection_throttle_fill_count":
		cfg.ConnThrottleFillCount, err = positiveInt(key, v)
	case "connection_throttle_freeze_time":
		var n int
		if n, err = strconv.Atoi(v); err != nil || n < -1 {
			return keyError(key, v, errors.New("must be -1 (off) or a non-negative number of milliseconds"))
		}
		switch {
		case n == -1:
			cfg.ConnThrottleFreezeTime = 0
		case n == 0:
			// ZooKeeper's 0: adjust at every connection a millisecond or more after the last.
			cfg.ConnThrottleFreezeTime = time.Nanosecond
		default:
			cfg.ConnThrottleFreezeTime = time.Duration(n) * time.Millisecond
		}
	case "connection_throttle_drop_increase":
		cfg.ConnThrottleDropIncrease, err = positiveFloat(key, v)
	case "connection_throttle_drop_decrease":
		cfg.ConnThrottleDropDecrease, err = positiveFloat(key, v)
	case "connection_throttle_decrease_ratio":
		var f float64
		if f, err = strconv.ParseFloat(v, 64); err != nil || f < 0 || f > 1 || math.IsNaN(f) {
			return keyError(key, v, errors.New("must be a number from 0 to 1"))
		}
		cfg.ConnThrottleDecreaseRatio = f
	case "connection_throttle_weight_enabled":
		cfg.ConnThrottleWeightEnabled, err = boolValue(key, v)
	case "connection_throttle_global_session_weight":
		cfg.ConnThrottleGlobalSessionWeight, err = weight(key, v, log)
	case "connection_throttle_local_session_weight":
		cfg.ConnThrottleLocalSessionWeight, err = weight(key, v, log)
	case "connection_throttle_renew_session_weight":
		cfg.ConnThrottleRenewSessionWeight, err = weight(key, v, log)
	case "largeRequestThreshold":
		n, err := strconv.Atoi(v)
		if err != nil {
			return keyError(key, v, errors.New("must be an integer"))
		}
		cfg.LargeRequestThreshold = max(n, 0)
		if n == 0 || n < -1 {
			// ZooKeeper's own correction, with its own warning.
			log.Warn("zoo.cfg: largeRequestThreshold must be -1 (off) or positive; large-request throttling is off", "key", key, "value", v)
			cfg.LargeRequestThreshold = 0
		}
	case "largeRequestMaxBytes":
		n, err := strconv.Atoi(v)
		if err != nil {
			return keyError(key, v, errors.New("must be an integer"))
		}
		if n <= 0 {
			log.Warn("zoo.cfg: largeRequestMaxBytes must be positive; the default of 100 MiB stays", "key", key, "value", v)
			n = 0
		}
		cfg.LargeRequestMaxBytes = n
	default:
		return keyError(key, v, errors.New("unknown throttling key"))
	}
	return err
}

// millis parses a number of milliseconds; zero is allowed only with zeroOK.
func millis(key, v string, zeroOK bool) (time.Duration, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || (n == 0 && !zeroOK) {
		return 0, keyError(key, v, errors.New("must be a positive number of milliseconds (or 0 where ZooKeeper allows it)"))
	}
	if n == 0 {
		// ZooKeeper's throttler then waits with Object.wait(0): until a request finishes.
		return time.Duration(math.MaxInt64), nil
	}
	return time.Duration(n) * time.Millisecond, nil
}

func positiveFloat(key, v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return 0, keyError(key, v, errors.New("must be a positive number"))
	}
	return f, nil
}

// weight parses a session weight; as in ZooKeeper, one that is not positive is replaced by the
// default (0 in server.Config) with a warning.
func weight(key, v string, log *slog.Logger) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, keyError(key, v, errors.New("must be an integer"))
	}
	if n <= 0 {
		log.Warn("zoo.cfg: a connection throttle weight must be above zero; the default applies", "key", key, "value", v)
		return 0, nil
	}
	return n, nil
}
