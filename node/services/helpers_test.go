package services

import (
	"fmt"

	"github.com/gleaner-net/gleaner/testnet/modelimage"
)

// modelService is a service of the model server with replicas replicas
// (as node's end-to-end tests run it).
func modelService(name string, replicas int) string {
	return fmt.Sprintf("name: %s\nkind: service\nimage: %s\n"+
		"env: {MODELSERVER_LOAD_DELAY: 100ms, MODELSERVER_TOKEN_DELAY: 1ms}\n"+
		"service:\n  port: %d\n  readiness: {path: /health, period: 1s}\n  replicas: {min: %d, max: %d}\n"+
		"resources: {gpus: 1}\ntier: bronze\nmax_price: 1.00\nduration: {max: 1h}\nallow_simulated: true\n",
		name, modelimage.Tag, modelimage.Port, replicas, replicas)
}
