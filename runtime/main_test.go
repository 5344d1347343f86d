package runtime_test

import (
	"os"
	"testing"

	"github.com/percore/percore/internal/leakcheck"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childServer()) // a child server of the inherited-socket tests
	}
	leakcheck.Main(m)
}
