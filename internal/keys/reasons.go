package keys

// Why a due request waits instead of starting: the words flow control
// decides and a request's record keeps in its waitingFor field (the API's
// waitingFor), one word each.
const (
	WaitingPaused       = "paused"        // its flow-control key is paused; a resume starts it
	WaitingQueue        = "queue"         // its queue's earlier requests go first
	WaitingRate         = "rate"          // its key's rate (or the rate cut by backpressure) gives it a later turn
	WaitingParallelism  = "parallelism"   // its key's parallelism is taken; a free slot starts it
	WaitingFairShare    = "fair_share"    // its destination (or tenant) holds its share of the workers' slots
	WaitingEndpointOpen = "endpoint_open" // its endpoint is open (failing); a probe that succeeds starts it
)
