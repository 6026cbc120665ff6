package flows

// WaitingRuns is how many runs have followers waiting for news.
func WaitingRuns(s *Service) int { return s.waker.pending() }
