package cpu

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/percore/percore/internal/leakcheck"
)

// envPrintCores makes the test binary print Cores() in list format and exit
// instead of running the tests; TestCoresUnderTaskset re-executes itself
// with it set.
const envPrintCores = "PERCORE_CPU_TEST_PRINT_CORES"

func TestMain(m *testing.M) {
	if os.Getenv(envPrintCores) == "1" {
		cores, err := Cores()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(FormatList(cores))
		os.Exit(0)
	}
	flag.Parse()
	if fuzz := flag.Lookup("test.fuzz"); fuzz != nil && fuzz.Value.String() != "" {
		// The fuzzing engine keeps an os/signal goroutine to the end; the
		// leak check is for the ordinary test run.
		os.Exit(m.Run())
	}
	leakcheck.Main(m)
}
