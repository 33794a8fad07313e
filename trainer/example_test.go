package trainer_test

import (
	"fmt"
	"sync"

	"github.com/batchkit/batchkit/trainer"
)

// Two ranks in one process train on the embedded digits. In a real job each
// rank is a process and passes trainer.FromCollective(comm) instead.
func ExampleTrain() {
	d, err := trainer.Digits()
	if err != nil {
		panic(err)
	}
	train, test, err := trainer.Split(d)
	if err != nil {
		panic(err)
	}
	cfg := trainer.Config{Hidden: []int{64}, Epochs: 5, BatchSize: 32, LR: 0.05, Momentum: 0.9, WeightDecay: 1e-4, Seed: 1}
	world := trainer.NewLocalWorld(2)
	results, errs := make([]trainer.Result, 2), make([]error, 2)
	var wg sync.WaitGroup
	for rank, comm := range world.Comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[rank], errs[rank] = trainer.Train(comm, train, test, cfg)
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		panic(fmt.Sprint(errs))
	}
	same := trainer.WeightsSHA256(results[0].Params) == trainer.WeightsSHA256(results[1].Params)
	fmt.Printf("steps %d, test accuracy above 0.9: %v, ranks agree: %v\n", results[0].Steps, results[0].TestAcc > 0.9, same)
	// Output: steps 115, test accuracy above 0.9: true, ranks agree: true
}
