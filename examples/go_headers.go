// Rate-limit an HTTP request with CL.THROTTLE from Go (go-redis).
// go get github.com/redis/go-redis/v9; go run examples/go_headers.go
package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// throttle answers one request of user: 15 requests per minute, bursts of up to 16.
// It sets the RateLimit headers and returns false (after writing a 429) when limited.
func throttle(ctx context.Context, rdb *redis.Client, w http.ResponseWriter, user string) (bool, error) {
	res, err := rdb.Do(ctx, "CL.THROTTLE", "rl:"+user, 15, 15, 60, 1).Int64Slice()
	if err != nil {
		return false, err
	}
	limited, limit, remaining, retryAfter, resetAfter := res[0], res[1], res[2], res[3], res[4]
	w.Header().Set("RateLimit-Limit", strconv.FormatInt(limit, 10))
	w.Header().Set("RateLimit-Remaining", strconv.FormatInt(remaining, 10))
	w.Header().Set("RateLimit-Reset", strconv.FormatInt(resetAfter, 10))
	if limited == 1 {
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfter, 10))
		http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
		return false, nil
	}
	return true, nil
}

func main() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		ok, err := throttle(r.Context(), rdb, w, r.RemoteAddr)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if ok {
			fmt.Fprintln(w, "hello")
		}
	})
	http.ListenAndServe("127.0.0.1:8080", nil)
}
