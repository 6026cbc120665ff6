package llm

import (
	"math/big"
	"time"
)

// priceDecimals is the number of decimal places of computed prices
// (rounded half away from zero), as Dify reports them.
const priceDecimals = 7

// pricing holds the prices of one model.
type pricing struct {
	input, output         *big.Rat
	inputText, outputText string
	unit                  *big.Rat
	unitText              string
	currency              string
}

func newPricing(input, output *decimal, unit, currency string) *pricing {
	p := &pricing{
		input: new(big.Rat), output: new(big.Rat),
		inputText: "0", outputText: "0",
		unitText: unit, currency: currency,
	}
	p.unit, _ = new(big.Rat).SetString(unit)
	if input != nil {
		p.input, p.inputText = input.rat, input.text
	}
	if output != nil {
		p.output, p.outputText = output.rat, output.text
	}
	return p
}

// makeUsage fills a Usage from token counts, adding prices when p is set.
func makeUsage(p *pricing, prompt, completion int, latency time.Duration) Usage {
	u := Usage{
		PromptTokens:     prompt,
		CompletionTokens: completion,
		TotalTokens:      prompt + completion,
		Latency:          latency,
	}
	if p == nil {
		return u
	}
	cost := func(tokens int, price *big.Rat) *big.Rat {
		c := new(big.Rat).SetInt64(int64(tokens))
		c.Mul(c, price)
		c.Mul(c, p.unit)
		// Round to the reported precision so that the total is the sum of
		// the two figures the client sees.
		r, _ := new(big.Rat).SetString(c.FloatString(priceDecimals))
		return r
	}
	in, out := cost(prompt, p.input), cost(completion, p.output)
	u.PromptUnitPrice, u.PromptPriceUnit = p.inputText, p.unitText
	u.CompletionUnitPrice, u.CompletionPriceUnit = p.outputText, p.unitText
	u.PromptPrice = in.FloatString(priceDecimals)
	u.CompletionPrice = out.FloatString(priceDecimals)
	u.TotalPrice = new(big.Rat).Add(in, out).FloatString(priceDecimals)
	u.Currency = p.currency
	return u
}
