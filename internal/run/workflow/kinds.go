package workflow

import "appkb/internal/apps"

// nodeKind is all the engine knows of one kind of node: how its settings
// are decoded when a graph compiles, and how a node of the kind runs.
type nodeKind struct {
	// decode reads the node's data into its typed settings (gnode.cfg);
	// an error refuses the graph. Nil for kinds whose executor reads the
	// data map itself.
	decode func(n *gnode) (any, error)
	run    executor
}

// nodeKinds is the one registry of the kinds the engine can compile and
// run, keyed by the kind names of package apps. Adding a kind is one row
// here plus its node file. It is filled in init because the container
// executors run their inner nodes through it, which a map literal in a
// variable declaration would turn into an initialization cycle.
var nodeKinds map[string]nodeKind

func init() {
	nodeKinds = map[string]nodeKind{
		apps.NodeStart:              {decode: decodeStart, run: runStart},
		apps.NodeEnd:                {decode: decodeEnd, run: runEnd},
		apps.NodeAnswer:             {decode: decodeAnswer, run: runAnswer},
		apps.NodeLLM:                {decode: decodeLLM, run: runLLM},
		apps.NodeIfElse:             {decode: decodeIfElse, run: runIfElse},
		apps.NodeCode:               {run: runCode},
		apps.NodeTemplateTransform:  {run: runTemplate},
		apps.NodeHTTPRequest:        {run: runHTTPRequest},
		apps.NodeTool:               {run: runTool},
		apps.NodeAgent:              {run: runAgent},
		apps.NodeKnowledgeRetrieval: {run: runKnowledge},
		apps.NodeQuestionClassifier: {decode: decodeClassifier, run: runClassifier},
		apps.NodeParameterExtractor: {decode: decodeExtractor, run: runExtractor},
		apps.NodeVariableAggregator: {decode: decodeAggregator, run: runAggregator},
		apps.NodeAssigner:           {decode: decodeAssigner, run: runAssigner},
		apps.NodeListOperator:       {decode: decodeListOperator, run: runListOperator},
		apps.NodeDocumentExtractor:  {decode: decodeDocExtractor, run: runDocExtractor},
		apps.NodeHumanInput:         {decode: decodeHumanInput, run: runHumanInput},
		apps.NodeIteration:          {decode: decodeIteration, run: runIteration},
		apps.NodeLoop:               {decode: decodeLoop, run: runLoop},
		apps.NodeIterationStart:     {run: runMarker},
		apps.NodeLoopStart:          {run: runMarker},
		apps.NodeLoopEnd:            {run: runMarker},
		apps.NodeDatasource:         {run: runDatasource},
		apps.NodeKnowledgeIndex:     {run: runKnowledgeIndex},
	}
}

// compileConfig decodes the typed settings of n, if its kind has them.
// Kinds the engine does not know pass here; running them fails later
// with NotSupported, as an unknown kind always has.
func compileConfig(n *gnode) error {
	k, ok := nodeKinds[n.kind]
	if !ok || k.decode == nil {
		return nil
	}
	cfg, err := k.decode(n)
	if err != nil {
		return err
	}
	n.cfg = cfg
	return nil
}
