# Like torch_ccl's env/setvars.sh (before 1.12).
export CCL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
