package bank

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// List asks the bank at base (http://host:port) for every transfer it
// recorded: GET /v1/transfers, which no fault touches.
func List(ctx context.Context, base string) ([]Transfer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/transfers", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("list the bank's transfers: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("list the bank's transfers: status %d", resp.StatusCode)
	}
	var list struct {
		Transfers []Transfer `json:"transfers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("list the bank's transfers: %w", err)
	}
	return list.Transfers, nil
}
