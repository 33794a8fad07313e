package trainer

import (
	"sync"
	"testing"
)

// digits is the embedded data set, split and scaled, read once.
var digits = sync.OnceValues(func() ([2]*Dataset, error) {
	d, err := Digits()
	if err != nil {
		return [2]*Dataset{}, err
	}
	tr, te, err := Split(d)
	return [2]*Dataset{tr, te}, err
})

func digitsSplit(t testing.TB) (train, test *Dataset) {
	t.Helper()
	d, err := digits()
	if err != nil {
		t.Fatal(err)
	}
	return d[0], d[1]
}

// defaults is batchkit train's default configuration.
func defaults() Config {
	return Config{Hidden: []int{64}, Epochs: 20, BatchSize: 32, LR: 0.05, Momentum: 0.9, WeightDecay: 1e-4, Seed: 1, CheckEvery: 100}
}

// trainWorld runs Train on n in-process ranks; cfgFor may adjust each
// rank's Config. It returns every rank's result and error.
func trainWorld(n int, train, test *Dataset, cfgFor func(rank int) Config) ([]Result, []error) {
	return trainWorldData(n, test, func(r int) (Config, *Dataset) { return cfgFor(r), train })
}

// trainWorldData is trainWorld with each rank's own train set.
func trainWorldData(n int, test *Dataset, cfgFor func(rank int) (Config, *Dataset)) ([]Result, []error) {
	w := NewLocalWorld(n)
	res, errs := make([]Result, n), make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg, train := cfgFor(r)
			res[r], errs[r] = Train(w.Comms[r], train, test, cfg)
			if errs[r] != nil {
				w.Abort()
			}
		}()
	}
	wg.Wait()
	return res, errs
}
