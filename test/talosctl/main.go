// talosctl's offline commands, the ones the tests run for real: `gen`, `machineconfig` and
// `validate` (ichor's and the Talos node simulator's), and `version --client` (`ichor doctor`).
// `gen` and `machineconfig` are talosctl's own commands, imported from Talos v1.14.1. `validate`
// and `version` live in packages that also hold `cluster create` and every node command, whose
// provisioners and clients are most of a talosctl build, so this file repeats their few lines
// (cmd/talosctl/cmd/mgmt/validate.go and cmd/talosctl/cmd/talos/version.go at v1.14.1) on the
// same Talos library calls. Anything else is refused as an unknown command: nodes are the
// simulator's (test/sim/talosctl-simulator.mjs).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/siderolabs/talos/cmd/talosctl/cmd/mgmt/gen"
	"github.com/siderolabs/talos/cmd/talosctl/cmd/mgmt/machineconfig"
	"github.com/siderolabs/talos/pkg/cli"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/validation"
	"github.com/siderolabs/talos/pkg/machinery/version"
)

// mode is the part of Talos's runtime.Mode (internal/app/machined/pkg/runtime/mode.go) that
// validation reads; that package is internal to Talos's module.
type mode string

func (m mode) String() string        { return string(m) }
func (m mode) RequiresInstall() bool { return m == "metal" }
func (m mode) InContainer() bool     { return m == "container" }

func parseMode(s string) (mode, error) {
	switch s {
	case "cloud", "container", "metal", "metal-agent":
		return mode(s), nil
	}

	return "", fmt.Errorf("unknown runtime mode: %q", s)
}

func validateCmd() *cobra.Command {
	var configArg, modeArg string

	var strict bool

	c := &cobra.Command{
		Use:   "validate",
		Short: "Validate config",
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			cfg, err := configloader.NewFromFile(configArg)
			if err != nil {
				return err
			}

			m, err := parseMode(modeArg)
			if err != nil {
				return err
			}

			opts := []validation.Option{validation.WithLocal()}
			if strict {
				opts = append(opts, validation.WithStrict())
			}

			warnings, err := cfg.ValidateAsClient(m, opts...)
			for _, w := range warnings {
				cli.Warning("%s", w)
			}

			if err != nil {
				return err
			}

			fmt.Printf("%s is valid for %s mode\n", configArg, modeArg)

			return nil
		},
	}
	c.Flags().StringVarP(&configArg, "config", "c", "", "the path of the config file")
	c.Flags().StringVarP(&modeArg, "mode", "m", "", "the mode to validate the config for (valid values are metal, cloud, and container)")
	cli.Should(c.MarkFlagRequired("mode"))
	c.Flags().BoolVar(&strict, "strict", false, "treat validation warnings as errors")

	return c
}

func versionCmd() *cobra.Command {
	var client bool

	c := &cobra.Command{
		Use:   "version",
		Short: "Prints the version",
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if !client {
				return errors.New("only `version --client` is built into this talosctl: nodes are the simulator's")
			}

			fmt.Println("Client:")
			version.PrintLongVersion()

			return nil
		},
	}
	c.Flags().BoolVar(&client, "client", false, "Print client version only")

	return c
}

func main() {
	root := &cobra.Command{Use: "talosctl", SilenceErrors: true, SilenceUsage: true}
	root.AddCommand(gen.Cmd, machineconfig.Cmd, validateCmd(), versionCmd())

	// As talosctl's Execute (cmd/talosctl/cmd/root.go): the error on stderr, exit 1.
	if _, err := cli.WithContextC(context.Background(), root.ExecuteContextC); err != nil {
		fmt.Fprintln(os.Stderr, err.Error())
		os.Exit(1)
	}
}
