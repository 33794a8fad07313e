package sbatch

import "testing"

// OptionHint: an sbatch option batchkit sbatch has a flag for is named by
// that flag; one it has none for goes through --sbatch-arg, its value kept.
func TestOptionHint(t *testing.T) {
	has := func(long string) bool { return long == "partition" || long == "nodelist" }
	for _, tc := range []struct{ name, word, want string }{
		{"spelled otherwise", "--partition=gpu", "--partition: batchkit sbatch spells this option --partition"},
		{"short, value attached", "-wnode1", "-wnode1: batchkit sbatch spells this option --nodelist"},
		{"no flag, with its value", "--hint=compute_bound", "--hint: batchkit sbatch has no flag for this sbatch option: use --sbatch-arg=--hint=compute_bound"},
		{"no flag, value required", "--hint", "--hint: batchkit sbatch has no flag for this sbatch option: use --sbatch-arg=--hint=VALUE"},
		{"not sbatch's", "--nosuch", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OptionHint(tc.word, has); got != tc.want {
				t.Errorf("OptionHint(%q) = %q\n want %q", tc.word, got, tc.want)
			}
		})
	}
}
