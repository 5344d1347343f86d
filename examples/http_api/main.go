//go:build linux

// Command http_api is a small JSON API on percore's runtime/httpd that
// keeps its data in redis-server through go-redis, a blocking client, and
// so calls it off the loop:
//
//	redis-server --port 6379 &
//	go run . -addr 127.0.0.1:8080 -redis 127.0.0.1:6379
//	curl -d '{"id":"7","name":"ada"}' http://127.0.0.1:8080/users
//	curl http://127.0.0.1:8080/users/7
//
// POST /users with {"id":"7","name":"ada"} stores the user (201; 400 for
// a body that is not such an object); GET /users/{id} returns it (200) or
// 404. Two ways to write the same API, chosen with -mode:
//
//   - loop: handlers inline on the loops (httpd.Mux); each redis call goes
//     to the server's worker pool with httpd.Server.Go, and the answer is
//     written back on the loop.
//   - nethttp: an ordinary http.ServeMux, run by httpd.Adapt on the same
//     worker pool, with net/http/pprof under /debug/pprof/.
//
// In both the loops do every socket operation, redis is called with a
// context that is cancelled when the client goes away, and past the
// workers and their queue a request gets 503. It takes the flags every
// example takes (-cores, -backend, -metrics) besides -redis and -mode.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/percore/percore/examples/internal/serverflag"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// user is what the API stores.
type user struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// parseUser reads a POST /users body.
func parseUser(body []byte) (user, error) {
	var u user
	if err := json.Unmarshal(body, &u); err != nil {
		return u, err
	}
	if u.ID == "" || u.Name == "" {
		return u, errors.New(`want {"id":"...","name":"..."}`)
	}
	return u, nil
}

func key(id string) string { return "user:" + id }

// loopRoutes is -mode loop: inline handlers, redis through Server.Go.
func loopRoutes(srv **httpd.Server, rdb *redis.Client) *httpd.Mux {
	m := httpd.NewMux()
	m.HandleFunc("POST /users", func(w *httpd.Response, r *httpd.Request) {
		u, err := parseUser(r.Body())
		if err != nil {
			w.WriteHeader(400)
			w.WriteString(err.Error() + "\n")
			return
		}
		val, _ := json.Marshal(u)
		(*srv).Go(w, func(ctx context.Context) func(*httpd.Response) {
			err := rdb.Set(ctx, key(u.ID), val, 0).Err()
			return func(w *httpd.Response) {
				if err != nil {
					w.WriteHeader(502)
					w.WriteString("redis: " + err.Error() + "\n")
					return
				}
				w.WriteHeader(201)
			}
		})
	})
	m.HandleFunc("GET /users/{id}", func(w *httpd.Response, r *httpd.Request) {
		id := string(r.PathValue("id")) // a copy: the work runs after r is gone
		(*srv).Go(w, func(ctx context.Context) func(*httpd.Response) {
			val, err := rdb.Get(ctx, key(id)).Bytes()
			return func(w *httpd.Response) {
				switch {
				case errors.Is(err, redis.Nil):
					w.WriteHeader(404)
					w.WriteString("no such user\n")
				case err != nil:
					w.WriteHeader(502)
					w.WriteString("redis: " + err.Error() + "\n")
				default:
					w.AddHeader("Content-Type", "application/json")
					w.Write(val)
				}
			}
		})
	})
	return m
}

// netHTTPRoutes is -mode nethttp: the same API as an http.ServeMux, with
// pprof.
func netHTTPRoutes(rdb *redis.Client) http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("POST /users", func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(r)
		var u user
		if err == nil {
			u, err = parseUser(body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		val, _ := json.Marshal(u)
		if err := rdb.Set(r.Context(), key(u.ID), val, 0).Err(); err != nil {
			http.Error(w, "redis: "+err.Error(), http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	m.HandleFunc("GET /users/{id}", func(w http.ResponseWriter, r *http.Request) {
		val, err := rdb.Get(r.Context(), key(r.PathValue("id"))).Bytes()
		switch {
		case errors.Is(err, redis.Nil):
			http.Error(w, "no such user", http.StatusNotFound)
		case err != nil:
			http.Error(w, "redis: "+err.Error(), http.StatusBadGateway)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Write(val)
		}
	})
	m.HandleFunc("/debug/pprof/", pprof.Index)
	m.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	m.HandleFunc("/debug/pprof/profile", pprof.Profile)
	m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	m.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return m
}

// readBody reads a small body whole.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 64<<10+1))
	if err == nil && len(b) > 64<<10 {
		err = errors.New("body too large")
	}
	return b, err
}

// config is what the flags set.
type config struct {
	percore.Config
	redis  string
	mode   string
	logger *slog.Logger
}

// server is a running API.
type server struct {
	srv *httpd.Server
	rt  *percore.Runtime
	rdb *redis.Client
}

func start(cfg config) (*server, error) {
	s := &server{rdb: redis.NewClient(&redis.Options{Addr: cfg.redis, PoolSize: 256})}
	var h httpd.Handler
	switch cfg.mode {
	case "loop":
		h = loopRoutes(&s.srv, s.rdb)
	case "nethttp":
		h = httpd.Adapt(netHTTPRoutes(s.rdb))
	default:
		s.rdb.Close()
		return nil, fmt.Errorf("-mode %q: want loop or nethttp", cfg.mode)
	}
	s.srv = httpd.New(httpd.Config{Logger: cfg.logger}, h)
	cfg.Config.Logger = cfg.logger
	rt, err := percore.New(cfg.Config, s.srv.Handler())
	if err != nil {
		s.srv.Close()
		s.rdb.Close()
		return nil, err
	}
	s.rt = rt
	return s, nil
}

// close stops the server at once.
func (s *server) close() {
	s.rt.Close()
	s.srv.Close()
	s.rdb.Close()
}

func main() {
	var cfg config
	sf := serverflag.Register(flag.CommandLine, "127.0.0.1:8080")
	flag.StringVar(&cfg.redis, "redis", "127.0.0.1:6379", "redis-server address")
	flag.StringVar(&cfg.mode, "mode", "loop", "loop (inline handlers, redis through Server.Go) or nethttp (an http.ServeMux through httpd.Adapt)")
	flag.Parse()
	cfg.Addr = sf.Addr
	sf.Apply(&cfg.Config)
	cfg.logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	s, err := start(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "http_api:", err)
		os.Exit(1)
	}
	ms, err := sf.ServeMetrics(s.rt)
	if err != nil {
		s.close()
		fmt.Fprintln(os.Stderr, "http_api:", err)
		os.Exit(1)
	}
	// Signals are caught before the line that says it listens: whoever reads
	// it may stop the server at once.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	fmt.Printf("http_api: %d loops listening on %s (%s), mode %s, redis %s\n",
		len(s.rt.Loops()), s.rt.Addr(), s.rt.Loops()[0].Backend(), cfg.mode, cfg.redis)
	<-ctx.Done()
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.rt.Shutdown(sctx) // requests in flight are answered, with Connection: close
	s.close()
	if ms != nil {
		ms.Close()
	}
}
