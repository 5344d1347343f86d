package cpu

import (
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
	leakcheck.Main(m)
}
