# Loads a Vagrantfile with a stand-in for Vagrant and prints each shell provisioner it
# configures as "MACHINE<TAB>SCRIPT<TAB>KEY=VALUE<TAB>...", so that tests/cluster/configs can run
# the lab's provisioners with the very environment the Vagrantfile gives them. With a second
# argument it also writes each machine's networks, libvirt disks and watchdog there, as
# "MACHINE<TAB>network|storage|watchdog<TAB>kind=FIRST_ARGUMENT<TAB>KEY=VALUE<TAB>..." (the
# shared SBD disk and the fencing's ping target are checked from these). Everything else the
# file configures is accepted and ignored.
# usage: ruby vagrantfile-env.rb VAGRANTFILE [DEVICES_FILE]
class VagrantfileRecorder
  def initialize(machine, out, devices)
    @machine = machine
    @out = out
    @devices = devices
  end

  def method_missing(name, *args, **opts, &block)
    if name == :define
      machine = VagrantfileRecorder.new(args[0].to_s, @out, @devices)
      block&.call(machine)
      return machine
    end
    if name == :provision && args[0].to_s == "shell"
      env = (opts[:env] || {}).map { |key, value| "#{key}=#{value}" }
      @out << ([@machine, opts[:path].to_s] + env).join("\t")
    end
    if %i[network storage watchdog].include?(name)
      fields = ["kind=#{args[0]}"] + opts.map { |key, value| "#{key}=#{value}" }
      @devices << ([@machine, name.to_s] + fields).join("\t")
    end
    block&.call(self)
    self
  end

  def respond_to_missing?(*)
    true
  end
end

module Vagrant
  PROVISIONERS = []
  DEVICES = []

  def self.configure(_version)
    yield VagrantfileRecorder.new("", PROVISIONERS, DEVICES)
  end
end

load ARGV.fetch(0)
puts Vagrant::PROVISIONERS
File.write(ARGV[1], Vagrant::DEVICES.map { |line| "#{line}\n" }.join) if ARGV[1]
