package queue

import "fmt"

// invalidID is the error of an operation given job id, which is not
// positive: it wraps ErrInvalidID, names the id and the operation, and says
// what ids are.
func invalidID(op string, id int64) error {
	return fmt.Errorf("%w: %s: job id %d is not positive; job ids are positive integers (1 and up, as Enqueue returns them), so no job has it and nothing was done", ErrInvalidID, op, id)
}

// checkIDs returns invalidID for the first of ids that is not positive, as
// op's refusal of them all, or nil when they are all positive.
func checkIDs(op string, ids []int64) error {
	for i, id := range ids {
		if id <= 0 {
			if len(ids) == 1 {
				return invalidID(op, id)
			}
			return invalidID(fmt.Sprintf("%s (id %d of %d given)", op, i+1, len(ids)), id)
		}
	}
	return nil
}
