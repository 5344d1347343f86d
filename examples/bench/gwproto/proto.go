package gwproto

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// MaxTopic is the longest topic name, in bytes.
const MaxTopic = 128

// MaxPublish is the largest publish body a gateway takes, in bytes.
const MaxPublish = 1 << 20

// Token returns the lowercase hex HMAC-SHA256 of user under secret.
func Token(secret, user string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(user))
	return hex.EncodeToString(m.Sum(nil))
}

// Authorized reports whether r is a request for /ws with a user and that
// user's token under secret. The token is compared in constant time.
func Authorized(r *http.Request, secret string) (user string, ok bool) {
	if r.URL.Path != "/ws" {
		return "", false
	}
	q := r.URL.Query()
	user, token := q.Get("user"), q.Get("token")
	if user == "" || len(token) != 2*sha256.Size {
		return "", false
	}
	return user, hmac.Equal([]byte(token), []byte(Token(secret, user)))
}

// Refuse answers a request that Authorized refused: 401, before any upgrade.
func Refuse(w http.ResponseWriter) {
	http.Error(w, "unauthorized", http.StatusUnauthorized)
}

// Command is a parsed text frame from a client.
type Command struct {
	Sub   bool   // SUB (else UNSUB)
	Topic string // the topic
}

// ParseCommand parses "SUB topic" or "UNSUB topic".
func ParseCommand(p []byte) (Command, error) {
	s := string(p)
	verb, topic, ok := strings.Cut(s, " ")
	if !ok {
		return Command{}, errors.New("want SUB topic or UNSUB topic")
	}
	var c Command
	switch verb {
	case "SUB":
		c.Sub = true
	case "UNSUB":
	default:
		return Command{}, fmt.Errorf("unknown command %.16q", verb)
	}
	if topic == "" || len(topic) > MaxTopic || strings.ContainsAny(topic, " \t\r\n") {
		return Command{}, errors.New("a topic is 1 to 128 bytes without spaces")
	}
	c.Topic = topic
	return c, nil
}

// Reply is the text frame that answers a command: "OK SUB topic", "OK UNSUB
// topic", or "ERR reason" when err is not nil.
func Reply(c Command, err error) []byte {
	if err != nil {
		return []byte("ERR " + err.Error())
	}
	if c.Sub {
		return []byte("OK SUB " + c.Topic)
	}
	return []byte("OK UNSUB " + c.Topic)
}

// Topics is a registry of subscribers by topic, safe for concurrent use.
// A subscriber keeps its own list of topics (to leave them all when it
// closes), so the registry holds one map entry per subscription and
// nothing per connection.
type Topics[C comparable] struct {
	mu sync.RWMutex
	m  map[string]map[C]struct{}
}

// Sub adds c to topic; it reports whether c was not in it.
func (t *Topics[C]) Sub(topic string, c C) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[string]map[C]struct{})
	}
	set := t.m[topic]
	if set == nil {
		set = make(map[C]struct{})
		t.m[topic] = set
	}
	if _, ok := set[c]; ok {
		return false
	}
	set[c] = struct{}{}
	return true
}

// Unsub removes c from topic; it reports whether c was in it.
func (t *Topics[C]) Unsub(topic string, c C) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	set := t.m[topic]
	if _, ok := set[c]; !ok {
		return false
	}
	delete(set, c)
	if len(set) == 0 {
		delete(t.m, topic)
	}
	return true
}

// Each calls fn for every subscriber of topic, under a read lock: fn must
// not block, nor call Sub or Unsub.
func (t *Topics[C]) Each(topic string, fn func(C)) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for c := range t.m[topic] {
		fn(c)
	}
}

// Subscription is a connection's own list of topics, for Topics.
type Subscription []string

// Apply carries out cmd for c on t and in s.
func Apply[C comparable](t *Topics[C], s *Subscription, c C, cmd Command) {
	if cmd.Sub {
		if t.Sub(cmd.Topic, c) {
			*s = append(*s, cmd.Topic)
		}
		return
	}
	if t.Unsub(cmd.Topic, c) {
		for i, x := range *s {
			if x == cmd.Topic {
				*s = append((*s)[:i], (*s)[i+1:]...)
				break
			}
		}
	}
}

// Leave removes c from every topic in s.
func Leave[C comparable](t *Topics[C], s *Subscription, c C) {
	for _, topic := range *s {
		t.Unsub(topic, c)
	}
	*s = nil
}

// PublishHandler serves POST /publish?topic=T: deliver hands body to every
// subscriber of topic and returns how many took it.
func PublishHandler(deliver func(topic string, body []byte) int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		topic := r.URL.Query().Get("topic")
		if topic == "" || len(topic) > MaxTopic {
			http.Error(w, "want ?topic=T", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxPublish+1))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if len(body) > MaxPublish {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if !utf8.Valid(body) {
			http.Error(w, "the body goes out as a text frame: it must be UTF-8", http.StatusBadRequest)
			return
		}
		n := deliver(topic, body)
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(strconv.Itoa(n))))
		_, _ = io.WriteString(w, strconv.Itoa(n))
	}
}

// Flags are the command-line flags every gateway takes.
type Flags struct {
	Addr         string
	Secret       string
	PingInterval time.Duration
	Queue        int
	WriteTimeout time.Duration
}

// Register defines the flags in fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Addr, "addr", "127.0.0.1:7300", "listen address")
	fs.StringVar(&f.Secret, "secret", "percore", "the secret tokens are HMAC-SHA256s under")
	fs.DurationVar(&f.PingInterval, "ping-interval", 30*time.Second, "ping connections this often; close those silent for twice as long")
	fs.IntVar(&f.Queue, "queue", 256, "outbound cap per connection, in messages: past it a publish is dropped for that subscriber")
	fs.DurationVar(&f.WriteTimeout, "write-timeout", 10*time.Second, "close a connection whose writes make no progress for this long")
}

// Check validates the flags.
func (f *Flags) Check() error {
	switch {
	case f.PingInterval <= 0:
		return errors.New("-ping-interval must be positive")
	case f.Queue < 1:
		return errors.New("-queue must be at least 1")
	case f.WriteTimeout <= 0:
		return errors.New("-write-timeout must be positive")
	}
	return nil
}
