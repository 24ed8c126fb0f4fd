module github.com/osmhq/osm/sdk

go 1.26.0
