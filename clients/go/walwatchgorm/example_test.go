package walwatchgorm_test

import (
	"context"
	"fmt"
	"log"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/walwatch/walwatch/clients/go/walwatch"
	"github.com/walwatch/walwatch/clients/go/walwatchgorm"
)

// Clusterpedia's rows, as its internalstorage maps them.
type Resource struct {
	ID       uint
	Group    string
	Version  string
	Resource string
	Cluster  string
	Name     string
	Object   []byte
}

// A gorm list with its exact resourceVersion: the query runs in walwatch's
// snapshot.
func ExampleList() {
	client, err := walwatch.NewClient(walwatch.Config{})
	if err != nil {
		log.Fatal(err)
	}
	db, err := gorm.Open(postgres.Open("host=db dbname=clusterpedia user=clusterpedia"), &gorm.Config{SkipDefaultTransaction: true})
	if err != nil {
		log.Fatal(err)
	}
	var rows []Resource
	rv, err := walwatchgorm.List(context.TODO(), client, db, func(tx *gorm.DB) error {
		return tx.Where(map[string]any{"group": "apps", "version": "v1", "resource": "deployments"}).
			Order("id").Find(&rows).Error
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(rows), "deployments at resourceVersion", rv)
}
