// Package parallel runs a reconcile's independent API calls at once. A reconcile's time is mostly round trips
// to the API server (each ~10–60 ms under load), so writes that do not depend on each other are issued
// together instead of one after the other.
package parallel

import (
	"errors"
	"sync"
)

// Do runs fns concurrently and returns their errors joined (nil when all succeed). It waits for all of them:
// a reconcile must not return while one of its writes is still in flight.
func Do(fns ...func() error) error {
	if len(fns) == 1 {
		return fns[0]()
	}
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
