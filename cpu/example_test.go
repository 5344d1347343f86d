package cpu_test

import (
	"fmt"

	"github.com/percore/percore/cpu"
)

func ExampleFormatList() {
	fmt.Println(cpu.FormatList([]int{11, 0, 1, 2, 3, 8, 10}))
	// Output: 0-3,8,10-11
}

func ExampleParseList() {
	cpus, err := cpu.ParseList("0-3,8\n") // as read from /sys/devices/system/cpu/online
	fmt.Println(cpus, err)
	// Output: [0 1 2 3 8] <nil>
}

func ExampleIRQMask() {
	fmt.Println(cpu.IRQMask(35))             // for /proc/irq/N/smp_affinity
	fmt.Println(cpu.IRQMaskSet([]int{0, 1})) // several CPUs
	// Output:
	// 00000008,00000000
	// 00000003
}

// Each loop goroutine pins itself before it creates anything tied to its
// thread, and keeps the thread until it returns.
func ExamplePin() {
	cores, err := cpu.Cores()
	if err != nil {
		fmt.Println(err)
		return
	}
	errs := make(chan error)
	for _, c := range cores {
		go func() {
			if err := cpu.Pin(c); err != nil {
				errs <- err
				return
			}
			// ... run this core's loop; returning ends the pinned thread.
			errs <- nil
		}()
	}
	pinned := 0
	for range cores {
		if err := <-errs; err != nil {
			fmt.Println(err)
			continue
		}
		pinned++
	}
	fmt.Println(pinned == len(cores))
	// Output: true
}
